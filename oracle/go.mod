module topoalign/oracle

go 1.24
