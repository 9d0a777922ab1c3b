"""The CDR of a camera bundle (``ovman_interfaces/CameraBundle``), composed and read without rclpy.

A CameraBundle carries a frame's five standard camera messages unchanged (:data:`MEMBERS`).
:func:`compose` builds its CDR from the recorded CDR of the five without decoding them (plain
little-endian CDR only, else :class:`CdrError`); :func:`decode` reads a bundle taken raw with rosbags,
its images as read-only numpy views of the received bytes (no copy), under the field names of the
rclpy message. The type's definition comes from the generated rclpy class, so it cannot drift from
``CameraBundle.msg``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from rosbags.serde import SerdeError
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from ovman_interfaces.msg import CameraBundle
from ovman_ros import bundle

TYPE_NAME = "ovman_interfaces/msg/CameraBundle"
_ALIGNMENT = {"camera_info": 8}
"""Largest alignment (bytes) of a member's fields where it exceeds 4 (float64 fields)."""
MEMBERS: tuple[tuple[str, str, int], ...] = tuple(
    (member, topic, _ALIGNMENT.get(member, 4)) for member, topic in bundle.CAMERA_BUNDLE_MEMBERS
)
"""CameraBundle's members in order: (member, the standard topic its message comes from, the
largest alignment of its fields in bytes)."""
CDR_LE = b"\x00\x01\x00\x00"
"""Encapsulation header of plain little-endian CDR with no options."""
_FIRST_FIELD_ALIGNMENT = 4
"""Every member's first field (a Header's int32 sec, a string's length) is 4-byte aligned: a
decoder starts each member at the next multiple of 4."""


class CdrError(ValueError):
    """Serialised messages that cannot form (or be read as) a CameraBundle; names the member."""


def compose(messages: Mapping[str, bytes]) -> bytes:
    """The CDR of the CameraBundle of one frame, from the CDR of its five messages keyed by their
    standard topic (each with its 4-byte encapsulation header, plain little-endian).

    In plain CDR a nested struct is the bytes of the message on its own, provided it starts at an
    offset with the same residue modulo its largest alignment. CameraBundle puts its members with
    8-byte fields first (CameraInfo, with its float64 arrays), so each member starts on
    a boundary its decoder aligns to, and the bodies are concatenated as they are."""
    parts = [CDR_LE]
    offset = 0  # within the body, after the encapsulation header
    for member, topic, alignment in MEMBERS:
        try:
            data = messages[topic]
        except KeyError:
            raise CdrError(f"camera bundle member {member}: no {topic} message") from None
        if data[:4] != CDR_LE:
            raise CdrError(
                f"camera bundle member {member} ({topic}): encapsulation {bytes(data[:4]).hex()}, "
                f"only plain little-endian CDR ({CDR_LE.hex()}) is composed"
            )
        padding = -offset % _FIRST_FIELD_ALIGNMENT
        if (offset + padding) % alignment:
            raise CdrError(
                f"camera bundle member {member} ({topic}) would start at offset {offset + padding}, "
                f"not a multiple of its alignment {alignment}: its bytes cannot be reused as they are"
            )
        parts.append(bytes(padding))
        parts.append(memoryview(data)[4:])
        offset += padding + len(data) - 4
    return b"".join(parts)


def decode(data: bytes) -> Any:
    """The CameraBundle in ``data`` (its CDR) as rosbags' message object: fields as in rclpy's
    class, image data and CameraInfo arrays as read-only numpy views of ``data``."""
    try:
        return _typestore().deserialize_cdr(data, TYPE_NAME)
    except (SerdeError, ValueError) as err:
        raise CdrError(f"not a CameraBundle ({len(data)} bytes): {err}") from None


@functools.cache
def _typestore() -> Typestore:
    """ROS 2 Kilted's types (those of the installed message wheels) plus CameraBundle."""
    store = get_typestore(Stores.ROS2_KILTED)
    definition = "\n".join(f"{kind} {name}" for name, kind in CameraBundle.get_fields_and_field_types().items())
    store.register(get_types_from_msg(definition, TYPE_NAME))
    return store
