// Row layouts for the norms (rmsnorm.comp, layernorm.comp), chosen by specialization
// constants: local_size_x is constant 0, ROW_MODE constant 1.
//   LV_ROWS_PER_WORKGROUP: one row per workgroup; lanes stride over the row, partial sums
//     meet through subgroupAdd and then shared memory (two barriers per reduction).
//     For GPUs (LONGVK_NORM_LAYOUT=workgroup forces it on any device).
//   LV_ROWS_PER_SUBGROUP: one row per subgroup (workgroup size / subgroup size rows per
//     workgroup); subgroupAdd alone, no barrier. For devices whose subgroup size the host
//     knows for sure (lavapipe: 8 lanes = one 256-bit register, barriers are slow).
// Every invocation of a row gets the same lv_row_index(); it walks its part of the row as
//   for (uint c = lv_row_lane(); c < cols; c += lv_row_lanes())
// and lv_row_sum combines the per-lane partial sums (all lanes of a row call it).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm_modes.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROW_MODE = LV_ROWS_PER_WORKGROUP;

// one partial sum per subgroup; workgroups are at most 1024 invocations and subgroups at
// least 4 lanes (the host checks both)
shared float lv_row_partial[256];

uint lv_row_index() {
    if (ROW_MODE == LV_ROWS_PER_WORKGROUP) return lv_group_index();
    return lv_group_index() * gl_NumSubgroups + gl_SubgroupID;
}

uint lv_row_lane() {
    if (ROW_MODE == LV_ROWS_PER_WORKGROUP) return gl_LocalInvocationID.x;
    return gl_SubgroupInvocationID;
}

uint lv_row_lanes() {
    if (ROW_MODE == LV_ROWS_PER_WORKGROUP) return gl_WorkGroupSize.x;
    return gl_SubgroupSize;
}

float lv_row_sum(float v) {
    v = subgroupAdd(v);
    if (ROW_MODE == LV_ROWS_PER_SUBGROUP) return v;
    if (subgroupElect()) lv_row_partial[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++) s += lv_row_partial[i];
    barrier(); // everyone has read the partials before a next reduction overwrites them
    return s;
}
