/* distref core — one strict JSON document from a text in memory (the
 * readers of shards.json and a trajectory's index.json share it).
 */
#ifndef DISTREF_CORE_JSON_TEXT_H
#define DISTREF_CORE_JSON_TEXT_H

#include <stddef.h>
#include <json-c/json.h>
#include "distref/error.h"

/* Parses text[0 .. len) as exactly one JSON value in json-c's strict mode,
 * whitespace allowed after it and nothing else. On an error (code `code`,
 * naming `name`): more than max bytes, a NUL byte (its offset), malformed
 * or truncated JSON (the byte near which it fails). *out: the value, the
 * caller's to json_object_put. */
int dr_json_text_parse(const char *text, size_t len, size_t max, const char *name, int code, json_object **out,
                       dr_err *err);

#endif
