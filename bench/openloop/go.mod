module metastore/bench/openloop

go 1.19
