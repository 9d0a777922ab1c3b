"""``ovman maps list|show|rm``: what the map store holds (ovman_mapping.map_store).

``--store DIR`` names the store (default: ``mapping.store_dir`` of the configuration, else
$XDG_DATA_HOME/ovman/maps). ``list`` prints one line per stored visit, a damaged or foreign file as
such with why; ``show`` one visit and its instances; ``rm`` deletes visits. ``--json`` prints JSON.
Exit codes: 0, 1 when a named map is missing or damaged (the message names the file).
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ovman_core.config import load_config
from ovman_mapping.map_store import MapStore, MapStoreError, StoredVisit, store_dir


def add(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = actions.add_parser("list", help="one line per stored visit")
    listed.set_defaults(map_ids=[])
    show = actions.add_parser("show", help="one stored visit and its instances")
    show.add_argument("map_ids", nargs=1, metavar="MAP_ID")
    remove = actions.add_parser("rm", help="delete stored visits")
    remove.add_argument("map_ids", nargs="+", metavar="MAP_ID")
    for action in (listed, show, remove):
        action.add_argument("--store", type=Path, help="store folder (default: mapping.store_dir)")
        action.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
        action.add_argument("--json", action="store_true", help="print JSON")
    return run


def run(args: argparse.Namespace) -> int:
    store = MapStore(args.store if args.store else store_dir(load_config(args.config).mapping_node.mapping.store_dir))
    try:
        if args.action == "list":
            return _list(store, args.json)
        if args.action == "show":
            entry = store.load(args.map_ids[0])
            print(json.dumps(_details(entry), indent=2) if args.json else _text(entry))
            return 0
        for map_id in args.map_ids:
            store.remove(map_id)
            if not args.json:
                print(f"removed {map_id}")
        if args.json:
            print(json.dumps({"removed": args.map_ids}))
        return 0
    except MapStoreError as err:
        print(f"ovman maps: {err}")
        return 1


def _list(store: MapStore, as_json: bool) -> int:
    rows: list[dict[str, Any]] = []
    for map_id in store.map_ids():
        try:
            rows.append(_summary(store.load(map_id)))
        except MapStoreError as err:
            rows.append({"map_id": map_id, "damaged": str(err)})
    if as_json:
        print(json.dumps({"store": str(store.root), "maps": rows}, indent=2))
        return 0
    print(f"{len(rows)} stored visits in {store.root}")
    for row in rows:
        if "damaged" in row:
            print(f"  {row['map_id']}  DAMAGED: {row['damaged']}")
            continue
        follows = f", follows {row['follows']}" if row["follows"] else ""
        print(
            f"  {row['map_id']}  {row['name']} visit {row['visit']}{follows}: {row['instances']} instances, "
            f"{row['fused']} frames fused, created {row['created']}"
        )
    return 0


def _created(entry: StoredVisit) -> str:
    moment = datetime.datetime.fromtimestamp(entry.created_ns / 1e9, tz=datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _summary(entry: StoredVisit) -> dict[str, Any]:
    return {
        "map_id": entry.map_id,
        "name": entry.name,
        "visit": entry.visit,
        "follows": entry.follows,
        "instances": len(entry.map),
        "fused": entry.fused,
        "skipped": entry.skipped,
        "frame_id": entry.frame_id,
        "created": _created(entry),
    }


def _details(entry: StoredVisit) -> dict[str, Any]:
    camera = entry.camera
    return {
        **_summary(entry),
        "camera": None if camera is None else camera.describe(),
        "identity": entry.identity,
        "encoder": entry.map.encoder,
        "kept_views": len(entry.views),
        "instances": [
            {
                "uid": i.uid,
                "label": i.label,
                "position": list(i.position),
                "moving": i.moving,
                "sightings": len(i.sightings),
            }
            for i in entry.map
        ],
    }


def _text(entry: StoredVisit) -> str:
    details = _details(entry)
    lines = [f"{k}: {v}" for k, v in details.items() if k != "instances"]
    lines.append(f"instances ({len(details['instances'])}; position: world x, y, z in metres):")
    for item in details["instances"]:
        x, y, z = item["position"]
        moving = "  moving" if item["moving"] else ""
        lines.append(
            f"  {item['uid']}  {item['label']}  ({x:.2f}, {y:.2f}, {z:.2f})  {item['sightings']} sightings{moving}"
        )
    return "\n".join(lines)
