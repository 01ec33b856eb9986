/* The default model's weights (assets/default-model/default.safetensors), embedded in the
 * library so that `longvk generate` needs no download and no data files. The path comes
 * from CMake (LONGVK_DEFAULT_MODEL). */
#if defined(__APPLE__)
#define LV_SYMBOL(name) _##name
    .const_data
#else
#define LV_SYMBOL(name) name
    .section .rodata
#endif
    .globl LV_SYMBOL(lv_default_model_bytes)
    .globl LV_SYMBOL(lv_default_model_end)
    .balign 64
LV_SYMBOL(lv_default_model_bytes):
    .incbin LONGVK_DEFAULT_MODEL
LV_SYMBOL(lv_default_model_end):
    .byte 0
#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
