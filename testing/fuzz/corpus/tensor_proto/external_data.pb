Bwj
locationdata.binj
offset16j
length24p