#version 450
// experimental register-blocked matmul v2
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "common.glsl"
#include "push_matmul.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TM = 16;  // rows per subgroup: a multiple of 8
layout(constant_id = 2) const uint TN = 4;   // columns per invocation
layout(constant_id = 3) const uint WDT = 0;
layout(constant_id = 4) const uint VEC = 1;
layout(constant_id = 5) const uint LD64 = 0;
vec4 u2f(u64vec2 v) { return vec4(uintBitsToFloat(unpackUint2x32(v.x)), uintBitsToFloat(unpackUint2x32(v.y))); }
#define LDW(i) (LD64 == 1u ? u2f(w8[(i) >> 2]) : w4[(i) >> 2])
#define LDA(i) (LD64 == 1u ? u2f(a8[(i) >> 2]) : a4[(i) >> 2])


layout(std430, binding = 0) writeonly buffer Out { float o[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer W4 { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer A8 { u64vec2 a8[]; };
layout(std430, binding = 2) readonly buffer W8 { u64vec2 w8[]; };
layout(std430, binding = 1) readonly buffer A16 { u64vec4 a16[]; };
layout(std430, binding = 2) readonly buffer W16 { u64vec4 w16[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };

const uint TR = TM / 8u;

layout(constant_id = 6) const uint SHUF = 0;
#define BC(v, l) (SHUF == 1u ? subgroupShuffle(v, l) : subgroupBroadcast(v, l))

void main() {
    uint L = gl_WorkGroupSize.x;
    uint lane = gl_LocalInvocationID.x;
    uint sl = gl_SubgroupInvocationID;
    uint m0 = gl_WorkGroupID.y * TM;
    uint n0 = gl_WorkGroupID.x * TN * L;
    uint z = gl_WorkGroupID.z;
    uint abase = pc.a_off + z * pc.a_batch;
    uint wbase = pc.w_off + z * pc.w_batch;
    uint arow[TR];
    uint wrow[TN];
    [[unroll]] for (uint r = 0; r < TR; r++) arow[r] = abase + min(m0 + r * 8u + sl, pc.M - 1u) * pc.K;
    [[unroll]] for (uint j = 0; j < TN; j++) wrow[j] = wbase + min(n0 + j * L + lane, pc.N - 1u) * pc.K;
    float acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM; i++) [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] = 0.0;
    uint K8 = pc.K & ~7u;
    for (uint k = 0; k < K8; k += 8u) {
        vec4 w0[TN], w1[TN];
        [[unroll]] for (uint j = 0; j < TN; j++) {
            if (LD64 == 2u) {
                u64vec4 t = w16[(wrow[j] + k) >> 3];
                w0[j] = u2f(t.xy); w1[j] = u2f(t.zw);
            } else {
            w0[j] = LDW(wrow[j] + k);
            w1[j] = LDW(wrow[j] + k + 4u);
            }
        }
        [[unroll]] for (uint r = 0; r < TR; r++) {
            vec4 x0, x1;
            if (LD64 == 2u) {
                u64vec4 t = a16[(arow[r] + k) >> 3];
                x0 = u2f(t.xy); x1 = u2f(t.zw);
            } else {
            x0 = LDA(arow[r] + k);
            x1 = LDA(arow[r] + k + 4u);
            }
#define ROW(l) { \
                vec4 p = BC(x0, l), q = BC(x1, l); \
                [[unroll]] for (uint j = 0; j < TN; j++) { \
                    float s = acc[(r * 8u + l) * TN + j]; \
                    s += p.x * w0[j].x; s += p.y * w0[j].y; s += p.z * w0[j].z; s += p.w * w0[j].w; \
                    s += q.x * w1[j].x; s += q.y * w1[j].y; s += q.z * w1[j].z; s += q.w * w1[j].w; \
                    acc[(r * 8u + l) * TN + j] = s; \
                } }
            ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
        }
    }
    for (uint k = K8; k < pc.K; k++) {
        float wv[TN];
        [[unroll]] for (uint j = 0; j < TN; j++) wv[j] = w[wrow[j] + k];
        [[unroll]] for (uint r = 0; r < TR; r++) {
            float x = a[arow[r] + k];
#define ROW(l) { float p = BC(x, l); [[unroll]] for (uint j = 0; j < TN; j++) acc[(r * 8u + l) * TN + j] += p * wv[j]; }
            ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
        }
    }
    [[unroll]] for (uint j = 0; j < TN; j++) {
        uint n = n0 + j * L + lane;
        if (n >= pc.N) continue;
        float b = pc.has_bias != 0u ? bias[pc.bias_off + n] : 0.0;
        [[unroll]] for (uint i = 0; i < TM; i++) {
            uint m = m0 + i;
            if (m < pc.M) o[pc.out_off + z * pc.out_batch + m * pc.ldo + n] = acc[i * TN + j] + b;
        }
    }
}
