Bwj
location
escape.binj
offset0j
length24p