/* Push-constant structs are declared once, in shaders/push_<op>.h, and read by both C and
 * GLSL through these macros:
 *
 *   LV_PUSH_BEGIN(lv_push_fill)
 *       LV_PUSH_U32 count;
 *       LV_PUSH_F32 value;
 *   LV_PUSH_END(lv_push_fill)
 *
 * In C this is `typedef struct lv_push_fill {...} lv_push_fill;`; in GLSL the push
 * constant block `pc`. Keep every member 4 bytes (uint, int, float) so the layouts agree,
 * and the whole struct at most 128 bytes. */
#ifndef LONGVK_PUSH_COMMON_H
#define LONGVK_PUSH_COMMON_H

#ifdef GL_core_profile
#define LV_PUSH_BEGIN(name) layout(push_constant) uniform name##_block {
#define LV_PUSH_END(name) } pc;
#define LV_PUSH_U32 uint
#define LV_PUSH_I32 int
#define LV_PUSH_F32 float
#else
#include <stdint.h>
#define LV_PUSH_BEGIN(name) typedef struct name {
#define LV_PUSH_END(name) } name; _Static_assert(sizeof(name) <= 128, #name " exceeds 128 bytes");
#define LV_PUSH_U32 uint32_t
#define LV_PUSH_I32 int32_t
#define LV_PUSH_F32 float
#endif

#endif
