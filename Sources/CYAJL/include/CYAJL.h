// YAJL, the streaming (event) JSON parser and generator: large job bodies are parsed as their
// frames arrive, so a million-token job is never held whole.
#include <yajl/yajl_parse.h>
#include <yajl/yajl_gen.h>

// yajl_config and yajl_gen_config are variadic, which Swift cannot call.
static inline int pw_yajl_set_option(yajl_handle handle, yajl_option option, int value) {
    return yajl_config(handle, option, value);
}
static inline int pw_yajl_gen_set_option(yajl_gen generator, yajl_gen_option option, int value) {
    return yajl_gen_config(generator, option, value);
}
