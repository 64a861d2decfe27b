"""Data sets: a9a bundled with the package, and the full data sets of `manifest.json`, found in
`DPDL_DATA_DIR` or the user cache (see `dpdl.data.paths`) and downloaded only by
`dpdl data fetch` (`dpdl.data.fetch`)."""
