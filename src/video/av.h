/* video/av.h — the FFmpeg functions stoker calls, loaded once at run time
 * (video/av.c).  Call them as AV(avcodec_open2)(...): the table's pointers
 * have the headers' own types, so the compiler checks every call. */
#ifndef STK_VIDEO_AV_H
#define STK_VIDEO_AV_H

#include "base/internal.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

/* X(library, function): library is F (libavformat), C (libavcodec),
 * U (libavutil) or S (libswscale). */
#define STK_AV_FUNCS(X)                                                                          \
	X(U, av_log_set_level) X(U, av_strerror) X(U, av_malloc) X(U, av_free)                   \
	X(U, av_freep) X(U, av_frame_alloc) X(U, av_frame_free) X(U, av_frame_unref)            \
	X(U, av_frame_ref) X(U, av_frame_get_buffer) X(U, av_frame_make_writable)               \
	X(U, av_dict_set) X(U, av_dict_free) X(U, av_pix_fmt_desc_get)                          \
	X(U, av_get_pix_fmt_name) X(U, av_get_pix_fmt) X(U, av_display_rotation_get)            \
	X(U, av_display_rotation_set) X(U, av_channel_layout_default) X(U, av_opt_set)          \
	X(U, av_rescale_q)                                                                       \
	X(C, avcodec_find_decoder) X(C, avcodec_find_decoder_by_name)                            \
	X(C, avcodec_find_encoder_by_name) X(C, avcodec_alloc_context3)                          \
	X(C, avcodec_free_context) X(C, avcodec_parameters_to_context)                           \
	X(C, avcodec_parameters_from_context) X(C, avcodec_open2) X(C, avcodec_send_packet)      \
	X(C, avcodec_receive_frame) X(C, avcodec_send_frame) X(C, avcodec_receive_packet)        \
	X(C, av_packet_alloc) X(C, av_packet_free) X(C, av_packet_unref)                         \
	X(C, av_packet_rescale_ts) X(C, avcodec_get_name)    \
	X(C, avcodec_flush_buffers) X(C, avcodec_parameters_copy)                               \
	X(F, avformat_alloc_context) X(F, avformat_open_input) X(F, avformat_find_stream_info)   \
	X(F, avformat_close_input) X(F, av_find_best_stream) X(F, av_read_frame)                 \
	X(F, av_seek_frame) X(F, avio_alloc_context) X(F, avio_context_free)                     \
	X(F, avformat_alloc_output_context2) X(F, avformat_new_stream) X(F, avio_open)           \
	X(F, avio_closep) X(F, avformat_write_header) X(F, av_interleaved_write_frame)           \
	X(F, av_write_trailer) X(F, avformat_free_context) X(F, av_stream_get_side_data)         \
	X(F, av_stream_new_side_data) X(F, av_find_input_format)                                 \
	X(S, sws_getCachedContext) X(S, sws_freeContext) X(S, sws_scale)                          \
	X(S, sws_getColorspaceDetails) X(S, sws_setColorspaceDetails)

struct stk__av {
#define STK__AV_PTR(lib, fn) __typeof__(fn) *fn;
	STK_AV_FUNCS(STK__AV_PTR)
#undef STK__AV_PTR
};
extern struct stk__av stk__av_fn;
#define AV(fn) (stk__av_fn.fn)

/* Loads the libraries once (any thread): 0, or -ENOSYS with the libraries'
 * names and the apt-get line in err. */
int stk__av_load(char *err, size_t errlen);
/* FFmpeg's message for an AVERROR code, into buf. */
const char *stk__av_err(int averr, char *buf, size_t len);

#endif
