Bwj
locationsub/data.binj
offset0j
length24p