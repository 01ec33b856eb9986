// Shared by the linear-attention shaders: the feature map phi (lv_feature_map codes).
#define LINATTN_PHI_IDENTITY 0u
#define LINATTN_PHI_RELU 1u
#define LINATTN_PHI_ELU1 2u

float linattn_phi(uint kind, float x) {
    if (kind == LINATTN_PHI_RELU) return max(x, 0.0);
    if (kind == LINATTN_PHI_ELU1) return x > 0.0 ? x + 1.0 : exp(x);
    return x;
}
