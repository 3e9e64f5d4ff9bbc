// MIOpenDriver line of gtest-group-conv-3d, 42 of 44: convfp16 -_ 3 -n 128 -c 4 -! 28 -H 28 -W 28 -k 8 -@ 3 -y 3 -x 3 -$ 1 -p 1 -q 1 -# 2 -u 2 -v 2 -^ 1 -l 1 -j 1 -g 4 -F 4 -I NCDHW -f NCDHW -O NCDHW
// Source: ROCm/MIOpen@99f5b6dddf18:test/gtest/group_conv.hpp (GroupConvTestConfig<3u>: 14 forward configs, 15 backward-data and backward-weight ones, written as MIOpenDriver lines, fp16 with NCDHW as the gtest's default). Written by scripts/import-tests (list); must print [1 1 1].
// REQUIRES: gpu, nightly
// RUN: %convgen convfp16 -_ 3 -n 128 -c 4 -! 28 -H 28 -W 28 -k 8 -@ 3 -y 3 -x 3 -$ 1 -p 1 -q 1 -# 2 -u 2 -v 2 -^ 1 -l 1 -j 1 -g 4 -F 4 -I NCDHW -f NCDHW -O NCDHW %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
