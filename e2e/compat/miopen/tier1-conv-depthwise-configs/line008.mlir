// MIOpenDriver line of tier1-conv-depthwise-configs, 8 of 57: conv -F 1 -f G0NC1 -I G0NC1 -O NGC01 -n 1 -c 128 -H 40 -W 40 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -g 128 -perf_priority 1
// Source: ROCm/rocmlirTriton@a284391bf44c:mlir/utils/performance/configs/tier1-conv-depthwise-configs. Written by scripts/import-tests (list); must print [1 1 1].
// REQUIRES: nightly
// RUN: %convgen conv -F 1 -f G0NC1 -I G0NC1 -O NGC01 -n 1 -c 128 -H 40 -W 40 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -g 128 -perf_priority 1 %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
