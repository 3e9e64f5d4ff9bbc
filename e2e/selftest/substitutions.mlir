// Self-test of the harness: every substitution expands (no '%' left) to a
// value convgen accepts. `lit -a` shows the expanded RUN line.
// RUN: echo "convgen=[%convgen] pv=[%pv] rand=[%random_data] x=[%xdlops] rms=[%rms_threshold] abs=[%abs_threshold] rel=[%rel_threshold] arch=[%arch]" | FileCheck %s
// CHECK: convgen=[{{[^%]+}}] pv=[{{(-pv|-pv_with_gpu)}}] rand=[-rand {{([0-9]+|fixed|none)}}] x=[{{(-x2|-x2=0)}}]
// CHECK-SAME: rms=[{{(auto|[0-9.eE+-]+)}}] abs=[{{(auto|[0-9.eE+-]+)}}] rel=[{{(auto|[0-9.eE+-]+)}}] arch=[{{[a-z0-9_]+}}]
