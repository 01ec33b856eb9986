/* Plain C reference for linear attention (engine/linear-attention.md), in double,
 * no Vulkan. Layout as the engine: q, k, v, out [n, heads*dim]; S [heads, dim, dim]
 * (row = value dim, column = key dim); z [heads, dim]; rope [n, dim] of (cos, sin) per
 * adjacent pair, or NULL. phi codes are lv_feature_map's (0 identity, 1 relu, 2 elu1).
 *
 * Every function can also return, per output, the magnitude `mag` of what was summed:
 * the same sums with every term replaced by its absolute value (the rotation's two
 * products taken separately; for a normalised output (mag_num + |o| mag_den) / |den|).
 * A float computation of the same expression that rounds m times along any term's path
 * is within m * 2^-24 * mag of the exact value (to first order), which is what the tests
 * assert. mag may be NULL. */
#ifndef LONGVK_REF_LINEAR_ATTENTION_H
#define LONGVK_REF_LINEAR_ATTENTION_H

enum { REF_RULE_ADDITIVE = 0, REF_RULE_WINDOW = 1, REF_RULE_DECAY = 2 };

double ref_phi(int phi, double x);

/* table[t][2j] = cos(pos[t] * theta^(-2j/dim)), table[t][2j+1] = sin(...), j < dim/2. */
void ref_rope_table_1d(float *table, const float *pos, int n, int dim, double theta);

/* S = sum_t v_t rot_t(phi(k_t))^T, z = sum_t phi(k_t) (plus S0, z0 when not NULL).
 * Outputs S [heads*dim*dim], z [heads*dim] and their magnitudes (either may be NULL). */
void ref_linattn_state(double *S, double *z, double *S_mag, double *z_mag, const float *S0,
                       const float *z0, const float *k, const float *v, const float *rope,
                       int n, int heads, int dim, int phi);

/* o_t = S rot_t(phi(q_t)) [ / (z . phi(q_t) + eps) ]. */
void ref_linattn_query(double *out, double *mag, const float *q, const float *S, const float *z,
                       const float *rope, int n, int heads, int dim, int phi, int normalize,
                       float eps);

/* The masked double sum evaluated directly: token i (block i / block_size) sees token j
 * (block j / block_size) when block(j) <= block(i), with weight
 *   additive: 1;  window K: 1 if block(i) - block(j) <= K else 0;  decay: lambda^(block(i) - block(j)),
 * and o_i = sum_j w v_j (rot_j phi(k_j)) . (rot_i phi(q_i)) [ / (sum_j w phi(k_j) . phi(q_i) + eps) ].
 * block_size = n gives `full`, 1 gives `causal`. */
void ref_linattn_masked(double *out, double *mag, const float *q, const float *k, const float *v,
                        const float *rope, int n, int heads, int dim, int block_size, int phi,
                        int normalize, float eps, int rule, int window, double decay);

#endif
