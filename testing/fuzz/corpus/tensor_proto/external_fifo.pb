Bwj
locationfifoj
offset0j
length24p