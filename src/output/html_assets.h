/* The files of the HTML report (src/output/html/), embedded into the binary
 * at build time by tools/embed_assets.sh as NUL-terminated byte arrays; the
 * generated definitions live in build/gen/html_assets.c. Internal to
 * src/output/. */
#ifndef PYSCOPE_OUTPUT_HTML_ASSETS_H
#define PYSCOPE_OUTPUT_HTML_ASSETS_H

#include <stddef.h>

/* report.html, with the markers where the CSS, the data and the JS go. */
extern const unsigned char html_asset_report_html[];
extern const size_t html_asset_report_html_len;
extern const unsigned char html_asset_report_css[];
extern const size_t html_asset_report_css_len;
extern const unsigned char html_asset_report_js[];
extern const size_t html_asset_report_js_len;

#endif
