// MIOpenDriver line of tier1-conv-depthwise-configs, 42 of 57: convfp16 -F 1 -f GNC01 -I G0NC1 -O NGC01 -n 1 -c 3 -H 128 -W 130 -k 3 -y 1 -x 3 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 3 -perf_priority 2
// Source: ROCm/rocmlirTriton@a284391bf44c:mlir/utils/performance/configs/tier1-conv-depthwise-configs. Written by scripts/import-tests (list); must print [1 1 1].
// REQUIRES: nightly
// RUN: %convgen convfp16 -F 1 -f GNC01 -I G0NC1 -O NGC01 -n 1 -c 3 -H 128 -W 130 -k 3 -y 1 -x 3 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 3 -perf_priority 2 %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
