// MIOpenDriver line of gtest-group-conv-3d, 14 of 44: convfp16 -_ 3 -n 6 -c 448 -! 3 -H 118 -W 182 -k 896 -@ 1 -y 1 -x 1 -$ 0 -p 0 -q 0 -# 1 -u 2 -v 2 -^ 1 -l 1 -j 1 -g 1 -F 1 -I NCDHW -f NCDHW -O NCDHW
// Source: ROCm/MIOpen@99f5b6dddf18:test/gtest/group_conv.hpp (GroupConvTestConfig<3u>: 14 forward configs, 15 backward-data and backward-weight ones, written as MIOpenDriver lines, fp16 with NCDHW as the gtest's default). Written by scripts/import-tests (list); must print [1 1 1].
// REQUIRES: gpu, nightly
// RUN: %convgen convfp16 -_ 3 -n 6 -c 448 -! 3 -H 118 -W 182 -k 896 -@ 1 -y 1 -x 1 -$ 0 -p 0 -q 0 -# 1 -u 2 -v 2 -^ 1 -l 1 -j 1 -g 1 -F 1 -I NCDHW -f NCDHW -O NCDHW %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
