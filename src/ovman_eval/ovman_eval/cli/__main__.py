"""``python -m ovman_eval.cli``: the ``ovman`` command."""

import sys

from ovman_eval.cli.main import main

sys.exit(main())
