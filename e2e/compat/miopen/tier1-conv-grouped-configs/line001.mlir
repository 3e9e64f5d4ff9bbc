// MIOpenDriver line of tier1-conv-grouped-configs, 1 of 5: convfp16 -F 1 -f GNC01 -I NGC01 -O NGC01 -n 1 -c 2560 -H 12 -W 12 -k 2560 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 2 -perf_priority 1
// Source: ROCm/rocmlirTriton@a284391bf44c:mlir/utils/performance/configs/tier1-conv-grouped-configs. Written by scripts/import-tests (list); must print [1 1 1].
// REQUIRES: nightly
// RUN: %convgen convfp16 -F 1 -f GNC01 -I NGC01 -O NGC01 -n 1 -c 2560 -H 12 -W 12 -k 2560 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 2 -perf_priority 1 %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
