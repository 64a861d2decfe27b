"""The figures and tables of the papers dpdl implements, run again with dpdl.

One module per reproduction, each behind `ReproductionModule`;
`reproduce` runs one through dpdl's run cache and writes its report;
`plugin` registers them in dpdl (`dpdl reproduce NAME`, `dpdl sweep
NAME`). Importing this package imports nothing else, so the plugin stays light for `dpdl
--help`.
"""

__version__ = "0.2.0"
