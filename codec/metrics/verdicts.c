/* One-line readings of the metrics summary. The seam thresholds are the design note's
 * (about 1: no visible seam; above 1.5: a seam you can see); the others are this module's
 * rules of thumb, stated in each line so a reader can judge them. */
#include <math.h>
#include <stdio.h>

#include "longvk/metrics.h"

static _Thread_local char line[256];

const char *lv_metrics_verdict_seam(const lv_metrics_summary *s) {
    double r = s->seam_ratio_mae;
    if (s->boundary_pairs == 0) return "no block boundary in this video: no seam to measure";
    if (s->within_pairs == 0) return "no frame pair inside a block: no seam ratio";
    if (isinf(r)) return "a seam: frames change only at block boundaries";
    if (r > 1.5) {
        snprintf(line, sizeof line, "a seam you can see: boundary pairs change %.1fx more than pairs within blocks (> 1.5)", r);
        return line;
    }
    if (r > 1.25) return "a faint seam (1.25 < R <= 1.5): boundaries change a little more than frames within blocks";
    if (r < 0.8) return "boundaries change less than frames within blocks (R < 0.8): no seam";
    return "no visible seam (R about 1)";
}

const char *lv_metrics_verdict_flicker(const lv_metrics_summary *s) {
    if (s->pairs == 0) return "a single frame: no flicker to measure";
    if (s->boundary_pairs > 0 && s->within_pairs > 0 &&
        s->luma_flicker_boundary > 2.0 * s->luma_flicker_within + 0.5) {
        snprintf(line, sizeof line,
                 "brightness flashes at block boundaries: mean luma jumps %.2f there vs %.2f within blocks",
                 s->luma_flicker_boundary, s->luma_flicker_within);
        return line;
    }
    if (s->luma_flicker > 2.0) {
        snprintf(line, sizeof line, "exposure pumping: mean luma changes %.2f a frame (> 2)", s->luma_flicker);
        return line;
    }
    return "steady exposure (mean luma changes < 2 a frame, no flashes at boundaries)";
}

const char *lv_metrics_verdict_colour(const lv_metrics_summary *s) {
    if (s->blocks < 2) return "one block: no drift between blocks to measure";
    double drift = 0;
    for (int c = 0; c < 3; c++)
        if (fabs(s->colour_drift[c]) > drift) drift = fabs(s->colour_drift[c]);
    if (drift >= 8 || s->colour_max_step >= 8) {
        snprintf(line, sizeof line, "strong colour drift: a channel mean moves %.1f first to last, "
                 "%.1f at most in one step (either >= 8 levels)",
                 drift, s->colour_max_step);
        return line;
    }
    if (drift >= 2 || s->colour_max_step >= 2) {
        snprintf(line, sizeof line, "slight colour drift: a channel mean moves %.1f first to last, "
                 "%.1f at most in one step (either >= 2 levels)",
                 drift, s->colour_max_step);
        return line;
    }
    return "no colour drift (channel means move < 2 levels)";
}

const char *lv_metrics_verdict_freeze(const lv_metrics_summary *s) {
    double f = s->freeze_fraction;
    if (s->pairs == 0) return "a single frame: nothing to freeze";
    if (f >= 0.99) return "frozen: the video does not move (the other metrics look perfect because of it)";
    if (f >= 0.5) return "mostly frozen: at least half of the frame pairs do not change";
    if (f >= 0.1) return "partly frozen: at least a tenth of the frame pairs do not change";
    return "moving (fewer than a tenth of the pairs frozen)";
}
