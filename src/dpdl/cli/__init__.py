"""The `dpdl` command line: `train`, `run-agent`, `run-local`, `noise`, `audit`,
`factorize`, `reproduce`, `sweep`, `demo`, `data` (`--help` on each).

One module per command holds its parser and its handler (`run-agent` and `run-local` share
`agents`); `options` holds the options several commands share and
`app` the top-level parser and `main`.

The parser is built from [`dpdl.choices`][dpdl.choices] and the settings a run declares, which are
light: the fields of [`TrainConfig`][dpdl.jobspec.config.TrainConfig] give the train, run-agent and
run-local options (and the graph, privacy and noise-design options of the other commands), those of
[`AgentOptions`][dpdl.runtime.options.AgentOptions] the runtime options
([`dpdl.settings`][dpdl.settings]). Each command imports its implementation when it runs, so `dpdl
--help` and `dpdl <command> --help` do not import torch, scipy or networkx.

Bad input ends with one `dpdl: error: ...` line on stderr and exit status 2, never a traceback;
any other exception is a bug in dpdl: its traceback is printed with a request to report it, and the
exit status is 1.

Results go to stdout (tables, `--json`) and stderr (summaries); the library's log records go to
stderr as `dpdl: level: message` lines at WARNING and above, INFO with `-v`, DEBUG with `-vv`,
errors only with `-q` (`dpdl.logs`; the processes a command starts inherit the level).
"""

from __future__ import annotations

from dpdl.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
