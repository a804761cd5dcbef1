"""``python -m attn_lib``: see :mod:`attn_lib.cli`."""

from attn_lib.cli import main

raise SystemExit(main())
