Bej
locationweights.binj
offset16j
length16p