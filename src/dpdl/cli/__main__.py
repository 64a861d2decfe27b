"""`python -m dpdl.cli`: the `dpdl` command (as torchrun starts the agents:
`torchrun ... -m dpdl.cli -- run-agent ...`)."""

import sys

from dpdl.cli import main

sys.exit(main())
