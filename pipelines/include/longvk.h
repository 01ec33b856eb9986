/* longvk: long video generation with linear-attention diffusion transformers on Vulkan.
 * The one header for programs that embed the library (pkg-config --cflags --libs longvk). */
#ifndef LONGVK_H
#define LONGVK_H

#include "longvk/status.h"
#include "longvk/dtype.h"
#include "longvk/files.h"
#include "longvk/json.h"
#include "longvk/engine.h"
#include "longvk/ops.h"
#include "longvk/npy.h"
#include "longvk/weights.h"
#include "longvk/quant.h"
#include "longvk/sana.h"
#include "longvk/codec.h"
#include "longvk/metrics.h"
#include "longvk/dit.h"
#include "longvk/sp_comm.h"
#include "longvk/cfg_partner.h"
#include "longvk/sampler.h"
#include "longvk/generate.h"
#include "longvk/frame_writer.h"
#include "longvk/vae.h"
#include "longvk/tokenizer.h"
#include "longvk/gemma2.h"
#include "longvk/sana_prompt.h"
#include "longvk/text.h"

#endif
