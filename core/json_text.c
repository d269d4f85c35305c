/* distref core — one strict JSON document from a text in memory
 * (core/json_text.h).
 */
#include "core/json_text.h"

#include <limits.h>
#include <string.h>

int dr_json_text_parse(const char *text, size_t len, size_t max, const char *name, int code, json_object **out,
                       dr_err *err)
{
    struct json_tokener *tok;
    enum json_tokener_error jerr;
    const char *nul;
    json_object *o;
    size_t at;
    *out = NULL;
    if (len >= (size_t)INT_MAX || len > max)
        return dr_fail(err, code, "%s: %zu bytes is too large (at most %zu)", name, len, max);
    if ((nul = memchr(text, '\0', len)))
        return dr_fail(err, code, "%s: a NUL byte at offset %zu", name, (size_t)(nul - text));
    if (!(tok = json_tokener_new())) return dr_fail(err, DR_ENOMEM, "%s: out of memory", name);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    o = json_tokener_parse_ex(tok, text, (int)len);
    jerr = json_tokener_get_error(tok);
    at = json_tokener_get_parse_end(tok);
    if (jerr == json_tokener_continue) {   /* the end of the text: tell json-c it is complete */
        o = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
        at = len;
    }
    json_tokener_free(tok);
    while (jerr == json_tokener_success && at < len && strchr(" \t\r\n", text[at])) at++;
    if (jerr == json_tokener_success && at < len) jerr = json_tokener_error_parse_unexpected;   /* more after it */
    if (jerr != json_tokener_success) {
        json_object_put(o);
        return dr_fail(err, code, "%s: malformed JSON near byte %zu: %s", name, at,
                       jerr == json_tokener_continue || jerr == json_tokener_error_parse_eof
                           ? "unexpected end (truncated?)" : json_tokener_error_desc(jerr));
    }
    *out = o;
    return DR_OK;
}
