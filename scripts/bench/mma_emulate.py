#!/usr/bin/env python3
"""kernels/layer_rows_mma.cuh's rows_phase_mma emulated lane by lane in numpy, with mma.m16n8k16's
fragment layouts as PTX defines them (A row-major: a0 row g cols 2q, 2q+1; a1 row g + 8; a2, a3
the same at cols + 8; B col-major: b0 k 2q, 2q+1 of col g, b1 k + 8; D: d0, d1 row g cols 2q,
2q + 1, d2, d3 row g + 8). Checks, without a GPU, that the weight fragments (span_fragments),
x's fragments (an 8-byte piece of a staged row a k step), the span sums of x the staging
writes, the tiles' rows (16 consecutive, or 8 and their partners) and the stores by lane give
every (row, weight row) the float product. Not the K slices' sum (plain adds), the parts of x
staged at once, nor the timing: the GPU's `mma_lab.py --rows-mma` checks the kernel itself.

    python3 scripts/bench/mma_emulate.py
"""
import numpy as np
rng=np.random.default_rng(0)
def fields(u):  # fields_bf16x2 -> list of 4 pairs (lo elem, hi elem)
    lo=[(u>>(8*i))&0xf for i in range(4)]; hi=[(u>>(8*i+4))&0xf for i in range(4)]
    return [(lo[i],hi[i]) for i in range(4)]
def span_frag(wa, wb):  # wa, wb: (word0, word1)
    pa=[fields(wa[0]),fields(wa[1])]; pb=[fields(wb[0]),fields(wb[1])]
    a=[[None]*4 for _ in range(4)]
    for s in range(4):
        t,o=s>>1,2*(s&1)
        a[s]=[pa[t][o],pb[t][o],pa[t][o+1],pb[t][o+1]]
    return a
def mma(D, A, B):  # D[lane][4], A[lane][4] pairs, B[lane] (b0 pair, b1 pair)
    Am=np.zeros((16,16)); Bm=np.zeros((16,8))
    for lane in range(32):
        g,q=lane>>2,lane&3
        a=A[lane]
        Am[g,2*q:2*q+2]=a[0]; Am[g+8,2*q:2*q+2]=a[1]; Am[g,2*q+8:2*q+10]=a[2]; Am[g+8,2*q+8:2*q+10]=a[3]
        b0,b1=B[lane]; Bm[2*q:2*q+2,g]=b0; Bm[2*q+8:2*q+10,g]=b1
    C=Am@Bm
    for lane in range(32):
        g,q=lane>>2,lane&3
        D[lane]+=np.array([C[g,2*q],C[g,2*q+1],C[g+8,2*q],C[g+8,2*q+1]])
def run(N,K,other,rows,G=64):
    WORDS=K//8; SP=K//64
    q4=rng.integers(0,16,(N,K)); sc=rng.normal(size=(N,K//G)); bi=rng.normal(size=(N,K//G))
    w=np.zeros((N,WORDS),dtype=np.uint64)
    for i in range(8): w|=(q4[:,i::8].astype(np.uint64)<<(4*i))
    x=rng.normal(size=(rows,K))
    Wd=q4*np.repeat(sc,G,1)+np.repeat(bi,G,1)
    ref=x@Wd.T
    y=np.full((rows,N),np.nan)
    tiles=N//16 if other==1 else (N//2)//8
    for tile in range(tiles):
        tot=np.zeros((32,4,4))
        for sp in range(SP):
            grp=sp*64//G
            A=[None]*32; sa=[0]*32
            for lane in range(32):
                g,q=lane>>2,lane&3
                ra=16*tile+g if other==1 else 8*tile+g
                rb=ra+(8 if other==1 else other)
                wa=(int(w[ra,sp*8+2*q]),int(w[ra,sp*8+2*q+1])); wb=(int(w[rb,sp*8+2*q]),int(w[rb,sp*8+2*q+1]))
                A[lane]=(span_frag(wa,wb),sc[ra,grp],bi[ra,grp],sc[rb,grp],bi[rb,grp],ra,rb)
            for j in range(4):
                if 8*j>=rows: continue
                xv=[]
                for lane in range(32):
                    g,q=lane>>2,lane&3; r=8*j+g
                    v=[x[min(r,rows-1),sp*64+(2*q+t)*8:sp*64+(2*q+t)*8+8] if r<rows else np.zeros(8) for t in range(2)]
                    xv.append(v)
                # The staging's span sums, read by lane (g, q) for its D columns' rows 8j + 2q, + 1.
                span=lambda r: x[min(r,rows-1),sp*64:sp*64+64].sum()
                xsum=np.array([[span(8*j+2*(l&3)),span(8*j+2*(l&3)+1),0,0] for l in range(32)])
                d=np.zeros((32,4))
                for s in range(4):
                    B=[]; Aa=[]
                    for lane in range(32):
                        v=xv[lane][s>>1]; off=4*(s&1)
                        B.append((v[off:off+2],v[off+2:off+4]))
                        Aa.append(A[lane][0][s])
                    mma(d,Aa,B)
                for lane in range(32):
                    _,sa_,ba_,sb_,bb_,_,_=A[lane]
                    tot[lane,j,0]+=sa_*d[lane,0]+ba_*xsum[lane,0]
                    tot[lane,j,1]+=sa_*d[lane,1]+ba_*xsum[lane,1]
                    tot[lane,j,2]+=sb_*d[lane,2]+bb_*xsum[lane,0]
                    tot[lane,j,3]+=sb_*d[lane,3]+bb_*xsum[lane,1]
        for lane in range(32):
            g,q=lane>>2,lane&3; ra,rb=A[lane][5],A[lane][6]
            for j in range(4):
                c=8*j+2*q
                if c<rows: y[c,ra]=tot[lane,j,0]; y[c,rb]=tot[lane,j,2]
                if c+1<rows: y[c+1,ra]=tot[lane,j,1]; y[c+1,rb]=tot[lane,j,3]
    err = np.nanmax(np.abs(y - ref)) / np.abs(ref).max()
    print(f"{N} x {K}, partner {other}, {rows} rows: unset {np.isnan(y).sum()}, relative error {err:.1e}")
    assert not np.isnan(y).any() and err < 1e-9, "the emulated phase is not the product"
if __name__ == "__main__":
    run(32, 128, 1, 5); run(32, 192, 16, 13); run(48, 128, 1, 32); run(32, 256, 16, 9, G=128)
