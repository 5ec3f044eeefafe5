Bwj
locationdata.binj
offset250j
length24p