/* Errors name the user's output, never the temporary file a video is written under (issue
 * 53, item 15: "x.mp4.resume-part" appeared in messages). A new video of generate, and a
 * resumed one, are written as OUT.resume-part beside OUT until their first block: made
 * impossible here by a folder of that name (which even root cannot open as a file), the
 * error names OUT and says that a temporary name beside it is written, and OUT is left
 * alone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "longvk/codec.h"
#include "ts_files.h"

Test(codec_messages, errors_name_the_output_not_its_temporary_file) {
    char out[1024], tmp[1100];
    snprintf(out, sizeof out, "%s", ts_tmp("msg-out.mkv"));
    snprintf(tmp, sizeof tmp, "%s.resume-part", out);
    unlink(out);
    rmdir(tmp);
    cr_assert_eq(mkdir(tmp, 0755), 0);
    lv_encoder_options o;
    lv_encoder_options_default(&o);
    o.codec = "ffv1";
    lv_encoder *enc = NULL;
    cr_assert_neq(lv_encoder_open_resume(out, 32, 32, 16.0, &o, 0, &enc), LV_OK);
    const char *e = lv_last_error();
    cr_assert_null(strstr(e, ".resume-part"), "the temporary file named: %s", e);
    cr_assert_not_null(strstr(e, out), "the output not named: %s", e);
    cr_assert_not_null(strstr(e, "temporary name beside it"), "%s", e);
    cr_assert_null(enc);
    cr_assert_eq(access(out, F_OK), -1, "%s was created", out);
    rmdir(tmp);
}
