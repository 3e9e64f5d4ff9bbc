// MIOpenDriver line of tier1-conv-depthwise-configs, 34 of 57: conv -F 1 -f G0NC1 -I G0NC1 -O NGC01 -n 1 -c 3 -H 24 -W 24 -k 3 -y 13 -x 13 -p 6 -q 6 -u 1 -v 1 -l 1 -j 1 -g 3 -perf_priority 10
// Source: ROCm/rocmlirTriton@a284391bf44c:mlir/utils/performance/configs/tier1-conv-depthwise-configs. Written by scripts/import-tests (list); must print [1 1 1].
// RUN: %convgen conv -F 1 -f G0NC1 -I G0NC1 -O NGC01 -n 1 -c 3 -H 24 -W 24 -k 3 -y 13 -x 13 -p 6 -q 6 -u 1 -v 1 -l 1 -j 1 -g 3 -perf_priority 10 %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
