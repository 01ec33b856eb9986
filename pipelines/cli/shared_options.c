/* Option values more than one command parses the same way. */
#include <string.h>

#include "commands.h"

const char *cli_parse_vae_tiles(const char *value, int *mode, int *tile_h, int *tile_w) {
    long d[2];
    if (strcmp(value, "auto") == 0) {
        *mode = LV_GEN_VAE_TILES_AUTO;
    } else if (strcmp(value, "off") == 0) {
        *mode = LV_GEN_VAE_TILES_OFF;
    } else if (cli_parse_dims(value, 2, 1, 4096, d)) {
        *mode = LV_GEN_VAE_TILES_FIXED;
        *tile_h = (int)d[0];
        *tile_w = (int)d[1];
    } else {
        return "is not auto, off or HxW in latent pixels in [1, 4096] (e.g. 32x32: 256 x 256 pixels)";
    }
    return NULL;
}
