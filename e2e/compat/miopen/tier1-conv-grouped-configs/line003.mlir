// MIOpenDriver line of tier1-conv-grouped-configs, 3 of 5: conv -F 1 -f GNC01 -I NGC01 -O NGC01 -n 1 -c 4 -H 3 -W 3 -k 1024 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 2 -perf_priority 2
// Source: ROCm/rocmlirTriton@a284391bf44c:mlir/utils/performance/configs/tier1-conv-grouped-configs. Written by scripts/import-tests (list); must print [1 1 1].
// RUN: %convgen conv -F 1 -f GNC01 -I NGC01 -O NGC01 -n 1 -c 4 -H 3 -W 3 -k 1024 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 2 -perf_priority 2 %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
