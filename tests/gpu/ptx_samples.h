// ptx_samples.h — hand-written PTX modules the driver tests load (and CI assembles with ptxas).
#pragma once

#include <string>

namespace framejit::test {

// y[i] = x[i] + 1 for i < n, one element per thread. `target` is an sm_XY name.
inline std::string add_one_ptx(const std::string& target) {
  return ".version 8.0\n.target " + target + R"(
.address_size 64

.visible .entry add_one(.param .u64 x, .param .u64 y, .param .u32 n)
{
    .reg .pred p;
    .reg .b32 r<5>;
    .reg .b64 rd<6>;
    .reg .f32 f<3>;
    ld.param.u64 rd1, [x];
    ld.param.u64 rd2, [y];
    ld.param.u32 r1, [n];
    mov.u32 r2, %ctaid.x;
    mov.u32 r3, %ntid.x;
    mov.u32 r4, %tid.x;
    mad.lo.s32 r2, r2, r3, r4;
    setp.ge.u32 p, r2, r1;
    @p bra DONE;
    cvta.to.global.u64 rd1, rd1;
    cvta.to.global.u64 rd2, rd2;
    mul.wide.u32 rd3, r2, 4;
    add.s64 rd4, rd1, rd3;
    add.s64 rd5, rd2, rd3;
    ld.global.f32 f1, [rd4];
    add.f32 f2, f1, 0f3F800000;
    st.global.f32 [rd5], f2;
DONE:
    ret;
}
)";
}

// Not PTX the driver accepts: an undeclared register.
inline std::string broken_ptx(const std::string& target) {
  return ".version 8.0\n.target " + target + R"(
.address_size 64
.visible .entry broken()
{
    add.f32 f1, f2, f3;
    ret;
}
)";
}

}  // namespace framejit::test
