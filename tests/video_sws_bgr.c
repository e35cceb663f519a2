/* video_sws_bgr.c — libswscale's resize of a YUV 4:2:0 box to 224x224 packed
 * RGB24 against BGR24 (src/video/convert.c writes BGR24 on x86 and swaps
 * the bytes: FFmpeg 5.1 has an x86 SIMD writer for BGR24, C only for RGB24):
 * the thread's CPU ms a frame over 300 frames of a synthetic 1280x720
 * frame, and the mean |difference| of the two outputs once swapped.
 * docs/BENCHMARKS.md "Video: where a clip's CPU goes" has the figures:
 *   cc -O2 tests/video_sws_bgr.c -o build/video_sws_bgr $(pkg-config --cflags --libs libswscale libavutil)
 *   build/video_sws_bgr 640 400   # the box's width and height */
#include <libswscale/swscale.h>
#include <libavutil/pixfmt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  if (argc < 3) return fprintf(stderr, "usage: video_sws_bgr W H\n"), 2;
  int W=1280,H=720, w=(int)strtol(argv[1],0,10), h=(int)strtol(argv[2],0,10), S=224;
  if (w < 8 || h < 8 || w > W || h > H) return fprintf(stderr, "a box within 1280x720\n"), 2;
  uint8_t *y=malloc(W*H), *u=malloc(W*H/4), *v=malloc(W*H/4);
  srand(1); for(int i=0;i<W*H;i++) y[i]=(i*7+(i/W)*3)&255; for(int i=0;i<W*H/4;i++){u[i]=(i*5)&255;v[i]=(i*3+100)&255;}
  const uint8_t *src[4]={y,u,v,0}; int ls[4]={W,W/2,W/2,0};
  uint8_t *o1=malloc(S*S*3+64), *o2=malloc(S*S*3+64); int dls=S*3;
  enum AVPixelFormat f[3]={AV_PIX_FMT_RGB24,AV_PIX_FMT_BGR24,AV_PIX_FMT_RGB24};
  int fl[3]={SWS_BILINEAR,SWS_BILINEAR,SWS_BILINEAR|SWS_ACCURATE_RND};
  for(int k=0;k<2;k++){
    struct SwsContext*c=sws_getContext(w,h,AV_PIX_FMT_YUV420P,S,S,f[k],fl[k],0,0,0);
    uint8_t*o=k?o2:o1;
    double t0=now(); for(int r=0;r<300;r++) sws_scale(c,src,ls,0,h,&o,&dls); double t=now()-t0;
    printf("%s: %.3f ms/frame\n", k?"BGR24":"RGB24", t/300*1e3);
    sws_freeContext(c);
  }
  long d=0; int mx=0; for(int i=0;i<S*S;i++) for(int c=0;c<3;c++){int a=o1[i*3+c], b=o2[i*3+2-c]; d+=abs(a-b); if(abs(a-b)>mx)mx=abs(a-b);}
  printf("mean |d| %.4f max %d\n",(double)d/(S*S*3),mx);
}
