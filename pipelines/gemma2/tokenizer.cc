// The C-callable SentencePiece wrapper (longvk/tokenizer.h): the library's only C++ file.
// Every entry point catches every exception, so none crosses into C; failures are
// lv_status values with lv_error messages like everywhere else.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <sys/stat.h>
#include <utility>
#include <vector>

#include "longvk/tokenizer.h"
#include "tokenizer_gguf.h"

namespace {

// Model files are a few MiB (Gemma's: 4.2 MiB); anything this large is not one.
constexpr long long kMaxModelBytes = 256ll << 20;

bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

lv_status read_file(const char *path, std::string *out) {
    FILE *fp = std::fopen(path, "rb");
    if (!fp) return lv_error(LV_ERR_IO, "%s: cannot open the tokenizer model: %s", path, std::strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        std::fclose(fp);
        return lv_error(LV_ERR_IO, "%s: not a regular file (a SentencePiece tokenizer.model is)", path);
    }
    if ((long long)st.st_size > kMaxModelBytes) {
        std::fclose(fp);
        return lv_error(LV_ERR_FORMAT, "%s: %lld bytes is too large for a SentencePiece model (limit %lld)", path,
                        (long long)st.st_size, kMaxModelBytes);
    }
    out->resize((size_t)st.st_size);
    size_t got = out->empty() ? 0 : std::fread(&(*out)[0], 1, out->size(), fp);
    bool err = std::ferror(fp) != 0;
    std::fclose(fp);
    if (err || got != out->size())
        return lv_error(LV_ERR_IO, "%s: read %zu of %zu bytes", path, got, out->size());
    return LV_OK;
}

}  // namespace

struct lv_tokenizer {
    sentencepiece::SentencePieceProcessor sp;
    std::string path;
    // Control pieces and <unk> with their ids, longest first: what LV_TOKENIZE_SPECIAL matches.
    std::vector<std::pair<std::string, int>> specials;
};

extern "C" lv_status lv_tokenizer_open(const char *path, lv_tokenizer **out) {
    if (!out) return lv_error(LV_ERR_INVALID, "lv_tokenizer_open: no output pointer");
    *out = nullptr;
    if (!path || !*path) return lv_error(LV_ERR_INVALID, "lv_tokenizer_open: no path");
    try {
        std::string file = path;
        if (is_dir(path)) {
            // a model folder holds tokenizer.model; a diffusers pipeline folder, tokenizer/
            file += "/tokenizer.model";
            std::string sub = std::string(path) + "/tokenizer/tokenizer.model";
            struct stat st;
            if (stat(file.c_str(), &st) != 0 && stat(sub.c_str(), &st) == 0) file = sub;
        }
        std::string bytes;
        if (lv_tokenizer_is_gguf(file.c_str())) { // a GGUF's tokenizer.ggml.* metadata (tokenizer_gguf.c)
            char *proto = nullptr;
            size_t len = 0;
            LV_TRY(lv_tokenizer_gguf_proto(file.c_str(), &proto, &len));
            bytes.assign(proto, len);
            std::free(proto);
        } else {
            LV_TRY(read_file(file.c_str(), &bytes));
        }
        if (bytes.empty())
            return lv_error(LV_ERR_FORMAT, "%s: empty file: not a SentencePiece model", file.c_str());
        std::unique_ptr<lv_tokenizer> tok(new lv_tokenizer);
        tok->path = file;
        auto st = tok->sp.LoadFromSerializedProto(bytes);
        if (!st.ok())
            return lv_error(LV_ERR_FORMAT, "%s: not a SentencePiece model (%s)", file.c_str(), st.ToString().c_str());
        int n = tok->sp.GetPieceSize();
        if (n <= 0) return lv_error(LV_ERR_FORMAT, "%s: a SentencePiece model without pieces", file.c_str());
        for (int id = 0; id < n; id++) {
            if (!tok->sp.IsControl(id) && !tok->sp.IsUnknown(id)) continue;
            const std::string &piece = tok->sp.IdToPiece(id);
            if (!piece.empty()) tok->specials.emplace_back(piece, id);
        }
        std::stable_sort(tok->specials.begin(), tok->specials.end(),
                         [](const auto &a, const auto &b) { return a.first.size() > b.first.size(); });
        *out = tok.release();
        return LV_OK;
    } catch (const std::bad_alloc &) {
        return lv_error(LV_ERR_NOMEM, "%s: out of memory loading the tokenizer", path);
    } catch (const std::exception &e) {
        return lv_error(LV_ERR_FORMAT, "%s: not a SentencePiece model (%s)", path, e.what());
    } catch (...) {
        return lv_error(LV_ERR_FORMAT, "%s: not a SentencePiece model", path);
    }
}

extern "C" void lv_tokenizer_close(lv_tokenizer *tok) { delete tok; }

namespace {

// Appends the SentencePiece ids of one segment (no special-text parsing).
lv_status encode_segment(const lv_tokenizer *tok, const char *text, size_t len, std::vector<int> *ids) {
    if (len == 0) return LV_OK;
    std::vector<int> part;
    auto st = tok->sp.Encode(std::string_view(text, len), &part);
    if (!st.ok())
        return lv_error(LV_ERR_INVALID, "%s: SentencePiece could not encode %zu bytes: %s", tok->path.c_str(), len,
                        st.ToString().c_str());
    ids->insert(ids->end(), part.begin(), part.end());
    return LV_OK;
}

}  // namespace

extern "C" lv_status lv_tokenizer_encode(const lv_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                         int32_t *ids, int max_ids, int *n, int *needed) {
    if (n) *n = 0;
    if (needed) *needed = 0;
    if (!tok || !n) return lv_error(LV_ERR_INVALID, "lv_tokenizer_encode: no tokenizer or no count pointer");
    if (!text && len) return lv_error(LV_ERR_INVALID, "lv_tokenizer_encode: no text");
    if (max_ids < 0 || (max_ids > 0 && !ids))
        return lv_error(LV_ERR_INVALID, "lv_tokenizer_encode: %d ids asked for with %s output array", max_ids,
                        ids ? "an" : "no");
    if (flags & ~(LV_TOKENIZE_BOS | LV_TOKENIZE_SPECIAL))
        return lv_error(LV_ERR_INVALID, "lv_tokenizer_encode: unknown flags 0x%x", flags);
    if (len > LV_TOKENIZER_MAX_TEXT)
        return lv_error(LV_ERR_LIMIT, "lv_tokenizer_encode: a text of %zu bytes is longer than the %u accepted",
                        len, LV_TOKENIZER_MAX_TEXT);
    try {
        std::vector<int> all;
        if (flags & LV_TOKENIZE_BOS) {
            int bos = tok->sp.bos_id();
            if (bos < 0) return lv_error(LV_ERR_INVALID, "%s: the model has no <bos> piece", tok->path.c_str());
            all.push_back(bos);
        }
        size_t start = 0;
        if (flags & LV_TOKENIZE_SPECIAL) {
            // Split at the leftmost, then longest, special text (Hugging Face's added tokens).
            for (size_t i = 0; i < len;) {
                int hit = -1;
                size_t hit_len = 0;
                for (const auto &sp : tok->specials) {
                    const std::string &s = sp.first;
                    if (s.size() <= len - i && (unsigned char)text[i] == (unsigned char)s[0] &&
                        std::memcmp(text + i, s.data(), s.size()) == 0) {
                        hit = sp.second;
                        hit_len = s.size();
                        break; // longest first
                    }
                }
                if (hit < 0) {
                    i++;
                    continue;
                }
                LV_TRY(encode_segment(tok, text + start, i - start, &all));
                all.push_back(hit);
                i += hit_len;
                start = i;
            }
        }
        LV_TRY(encode_segment(tok, text + start, len - start, &all));
        if (all.size() > (size_t)INT32_MAX)
            return lv_error(LV_ERR_LIMIT, "lv_tokenizer_encode: %zu tokens", all.size());
        int total = (int)all.size(), k = total < max_ids ? total : max_ids;
        for (int i = 0; i < k; i++) ids[i] = all[(size_t)i];
        *n = k;
        if (needed) *needed = total;
        return LV_OK;
    } catch (const std::bad_alloc &) {
        return lv_error(LV_ERR_NOMEM, "lv_tokenizer_encode: out of memory (%zu bytes of text)", len);
    } catch (const std::exception &e) {
        return lv_error(LV_ERR_INVALID, "lv_tokenizer_encode: %s", e.what());
    } catch (...) {
        return lv_error(LV_ERR_INVALID, "lv_tokenizer_encode: SentencePiece failed");
    }
}

extern "C" lv_status lv_tokenizer_decode(const lv_tokenizer *tok, const int32_t *ids, int n, char *buf, size_t size,
                                         size_t *len) {
    if (len) *len = 0;
    if (!tok || n < 0 || (n > 0 && !ids) || (size > 0 && !buf))
        return lv_error(LV_ERR_INVALID, "lv_tokenizer_decode: bad arguments");
    try {
        int vocab = tok->sp.GetPieceSize();
        std::vector<int> v((size_t)n);
        for (int i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= vocab)
                return lv_error(LV_ERR_INVALID, "lv_tokenizer_decode: id %d at position %d is outside the vocabulary "
                                "(%d pieces)", (int)ids[i], i, vocab);
            v[(size_t)i] = ids[i];
        }
        std::string text;
        auto st = tok->sp.Decode(v, &text);
        if (!st.ok()) return lv_error(LV_ERR_INVALID, "lv_tokenizer_decode: %s", st.ToString().c_str());
        if (size > 0) {
            size_t k = text.size() < size - 1 ? text.size() : size - 1;
            std::memcpy(buf, text.data(), k);
            buf[k] = 0;
        }
        if (len) *len = text.size();
        return LV_OK;
    } catch (const std::bad_alloc &) {
        return lv_error(LV_ERR_NOMEM, "lv_tokenizer_decode: out of memory");
    } catch (...) {
        return lv_error(LV_ERR_INVALID, "lv_tokenizer_decode: SentencePiece failed");
    }
}

extern "C" int lv_tokenizer_vocab_size(const lv_tokenizer *tok) { return tok ? tok->sp.GetPieceSize() : 0; }

extern "C" const char *lv_tokenizer_piece(const lv_tokenizer *tok, int id) {
    if (!tok || id < 0 || id >= tok->sp.GetPieceSize()) return nullptr;
    return tok->sp.IdToPiece(id).c_str();
}

extern "C" int lv_tokenizer_bos_id(const lv_tokenizer *tok) { return tok ? tok->sp.bos_id() : -1; }
extern "C" int lv_tokenizer_eos_id(const lv_tokenizer *tok) { return tok ? tok->sp.eos_id() : -1; }
extern "C" int lv_tokenizer_pad_id(const lv_tokenizer *tok) { return tok ? tok->sp.pad_id() : -1; }
extern "C" int lv_tokenizer_unk_id(const lv_tokenizer *tok) { return tok ? tok->sp.unk_id() : -1; }
extern "C" const char *lv_tokenizer_path(const lv_tokenizer *tok) { return tok ? tok->path.c_str() : ""; }
