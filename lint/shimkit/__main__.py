"""Allow `python -m shimkit`."""

from shimkit.cli import main

raise SystemExit(main())
