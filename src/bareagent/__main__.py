"""Allow `python -m bareagent`."""

from bareagent.cli.main import main

raise SystemExit(main())
