/* Lookup of the compiled-in, header-generated layout tables by version.
 * For 3.13+ the target's own _Py_DebugOffsets (debug_offsets.c) is the
 * primary source; the 3.13-3.15 tables here are its fallback and cross-check. */
#include "python/layout.h"

const struct py_layout *py_layout_for_version(unsigned version_hex)
{
    /* Ranges start at X.Y.0 final, so alphas, betas and release candidates
     * (whose layouts may still move) find no table. */
    for (size_t i = 0; i < py_generated_layouts_count; i++) {
        const struct py_layout_entry *entry = &py_generated_layouts[i];
        if (version_hex >= entry->version_min && version_hex <= entry->version_max)
            return &entry->layout;
    }
    return NULL;
}
