	Bwj
locationsub/data.binJ
of,ft4p