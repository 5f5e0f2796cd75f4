#!/usr/bin/env python3
"""CPU emulation of flash2's index math: the kernel's loads, swizzle, ldmatrix, mma.sync
fragment layouts (as the PTX ISA documents them), masking and online softmax, lane by lane,
for the plain path (one (batch, head) per block) and the packed path (several short heads
per block, block-diagonal mask), against a float64 reference. It checks the indexing before
any GPU run; it proves nothing about the hardware. Run: python3 kernels/flash2/emulate.py
(numpy; a few minutes). Keep it in step with flash2.cu when the tiling changes."""
import numpy as np, math, sys
BM=64; BN=64; WARPS=4

def swz(D,row,chunk): return row*D + ((chunk ^ (row & 7)) << 3)

def load_tile(tile,D,src,row_of,ROWS):
    # row_of(r) = (job, pos) of tile row r, or None past the data (zero-filled)
    CH=D//8
    for c in range(ROWS*CH):
        row,chunk=divmod(c,CH)
        off=swz(D,row,chunk); at=row_of(row)
        if at is not None: tile[off:off+8]=src[at[0]][at[1], chunk*8:chunk*8+8]
        else: tile[off:off+8]=0

def ldm(tile,addrs,trans=False):
    # addrs[lane] = element offset of the 8-element row lane provides; returns regs[lane][j] = (lo, hi)
    regs=[[None]*4 for _ in range(32)]
    for j in range(4):
        m=np.array([tile[addrs[8*j+r]:addrs[8*j+r]+8] for r in range(8)])
        for lane in range(32):
            g,t=lane>>2,lane&3
            regs[lane][j]=(m[g,2*t],m[g,2*t+1]) if not trans else (m[2*t,g],m[2*t+1,g])
    return regs

def mma(C,A,B0,B1):
    # C[lane]=[4], A[lane]=[4 pairs], B0/B1[lane]=pair
    a=np.zeros((16,16)); b=np.zeros((16,8)); c=np.zeros((16,8))
    for lane in range(32):
        g,t=lane>>2,lane&3
        a[g,2*t:2*t+2]=A[lane][0]; a[g+8,2*t:2*t+2]=A[lane][1]
        a[g,2*t+8:2*t+10]=A[lane][2]; a[g+8,2*t+8:2*t+10]=A[lane][3]
        b[2*t:2*t+2,g]=B0[lane]; b[2*t+8:2*t+10,g]=B1[lane]
        c[g,2*t:2*t+2]=C[lane][0:2]; c[g+8,2*t:2*t+2]=C[lane][2:4]
    d=a@b+c
    for lane in range(32):
        g,t=lane>>2,lane&3
        C[lane][0:2]=d[g,2*t:2*t+2]; C[lane][2:4]=d[g+8,2*t:2*t+2]

def packed_slot(tile_row,per_head): return divmod(tile_row,per_head)  # (head, pos)

def tiles(D,MT,packed):
    # (BM, BN, row tiles per warp) as flash2.cu's Config: packed blocks always 64 x 64, one tile per warp
    if packed: return 16*WARPS, 64, 1
    return 16*WARPS*MT, (32 if (MT==2 and D==128) else 64), MT

def kernel_block(Q,K,V,D,causal,scale,O,LSE,packed,job0,m0,pack,MT=1):
    """One block: Q, K, V, O are [jobs][S][D], LSE [jobs][Sq] (job = b * heads + h). Each
    (warp, row tile) pair is emulated as its own unit of 16 rows: the MT tiles of a warp share
    only the K/V fragments they read, which are the same values for each."""
    BM,BN,MTb=tiles(D,MT,packed); UNITS=WARPS*MTb
    jobs=len(Q); Sq,Sk=Q.shape[1],K.shape[1]; off=Sk-Sq
    KSTEPS=D//16; NT_S=BN//8; NT_O=D//8
    def q_row(r):
        job,pos=job0,m0+r
        if packed:
            hd,pos=packed_slot(r,Sq); job+=hd
            if hd>=pack or job>=jobs: return None
        elif pos>=Sq: return None
        return (job,pos)
    def kv_row(key0):
        def f(c):
            job,pos=job0,key0+c
            if packed:
                hd,pos=packed_slot(c,Sk); job+=hd
                if hd>=pack or job>=jobs: return None
            elif pos>=Sk: return None
            return (job,pos)
        return f
    nb=1 if packed else (Sk+BN-1)//BN
    if not packed and causal:
        last=min(m0+BM-1,Sq-1)+off
        nb=0 if last<0 else min(nb,last//BN+1)
    if nb==0:
        for r in range(m0,min(m0+BM,Sq)): O[job0][r]=0; LSE[job0][r]=-math.inf
        return
    sQ=np.zeros(BM*D); sK=[np.zeros(BN*D),np.zeros(BN*D)]; sV=[np.zeros(BN*D),np.zeros(BN*D)]
    load_tile(sQ,D,Q,q_row,BM); load_tile(sK[0],D,K,kv_row(0),BN); load_tile(sV[0],D,V,kv_row(0),BN)
    state=[]
    for warp in range(UNITS):
        state.append(dict(acc=[[np.zeros(4) for _ in range(NT_O)] for _ in range(32)],
                          rmax=[[-math.inf,-math.inf] for _ in range(32)], rsum=[[0.0,0.0] for _ in range(32)], qf=None))
    def slot_of(tile_row):
        return packed_slot(tile_row,Sq) if packed else (0,m0+tile_row)
    for j in range(nb):
        if j+1<nb:
            s=(j+1)&1
            load_tile(sK[s],D,K,kv_row((j+1)*BN),BN); load_tile(sV[s],D,V,kv_row((j+1)*BN),BN)
        cK,cV=sK[j&1],sV[j&1]
        for warp in range(UNITS):
            st=state[warp]
            if j==0:
                st['qf']=[]
                for kk in range(KSTEPS):
                    addrs=[swz(D,warp*16+(l&7)+(((l>>3)&1)<<3),2*kk+(l>>4)) for l in range(32)]
                    st['qf'].append(ldm(sQ,addrs))
            S=[[np.zeros(4) for _ in range(NT_S)] for _ in range(32)]
            for kk in range(KSTEPS):
                A=[st['qf'][kk][l] for l in range(32)]
                for nt in range(0,NT_S,2):
                    addrs=[swz(D,nt*8+(l&7)+((l>>4)<<3),2*kk+((l>>3)&1)) for l in range(32)]
                    bk=ldm(cK,addrs)
                    C=[S[l][nt] for l in range(32)]; mma(C,A,[bk[l][0] for l in range(32)],[bk[l][1] for l in range(32)])
                    C=[S[l][nt+1] for l in range(32)]; mma(C,A,[bk[l][2] for l in range(32)],[bk[l][3] for l in range(32)])
            n0=j*BN
            mask= packed or n0+BN>Sk or (causal and n0+BN-1>m0+off)
            for l in range(32):
                g,t=l>>2,l&3
                for nt in range(NT_S):
                    for e in range(4):
                        x=S[l][nt][e]*scale
                        if mask:
                            rh,rp=slot_of(warp*16+g+((e>>1)<<3))
                            col=n0+nt*8+2*t+(e&1)
                            ch,cp=packed_slot(col,Sk) if packed else (0,col)
                            if ch!=rh or cp>=Sk or (causal and cp>rp+off): x=-math.inf
                        S[l][nt][e]=x
            for r in range(2):
                mx=[max([st['rmax'][l][r]]+[max(S[l][nt][2*r],S[l][nt][2*r+1]) for nt in range(NT_S)]) for l in range(32)]
                mx=[max(mx[l],mx[l^1]) for l in range(32)]; mx=[max(mx[l],mx[l^2]) for l in range(32)]
                for l in range(32):
                    base=0.0 if mx[l]==-math.inf else mx[l]
                    corr=2.0**(st['rmax'][l][r]-base) if st['rmax'][l][r]!=-math.inf else 0.0
                    st['rmax'][l][r]=mx[l]
                    sm=0.0
                    for nt in range(NT_S):
                        for c in range(2):
                            v=S[l][nt][2*r+c]; p=0.0 if v==-math.inf else 2.0**(v-base)
                            S[l][nt][2*r+c]=p; sm+=p
                    st['rsum'][l][r]=st['rsum'][l][r]*corr+sm
                    for dt in range(NT_O): st['acc'][l][dt][2*r]*=corr; st['acc'][l][dt][2*r+1]*=corr
            for kb in range(BN//16):
                A=[[(S[l][2*kb][0],S[l][2*kb][1]),(S[l][2*kb][2],S[l][2*kb][3]),(S[l][2*kb+1][0],S[l][2*kb+1][1]),(S[l][2*kb+1][2],S[l][2*kb+1][3])] for l in range(32)]
                A=[[tuple(np.float16(x) for x in pr) for pr in A[l]] for l in range(32)]
                for dt in range(0,NT_O,2):
                    addrs=[swz(D,kb*16+(l&7)+(((l>>3)&1)<<3),dt+(l>>4)) for l in range(32)]
                    bv=ldm(cV,addrs,trans=True)
                    C=[st['acc'][l][dt] for l in range(32)]; mma(C,A,[bv[l][0] for l in range(32)],[bv[l][1] for l in range(32)])
                    C=[st['acc'][l][dt+1] for l in range(32)]; mma(C,A,[bv[l][2] for l in range(32)],[bv[l][3] for l in range(32)])
    for warp in range(UNITS):
        st=state[warp]
        for r in range(2):
            ls=[st['rsum'][l][r] for l in range(32)]
            ls=[ls[l]+ls[l^1] for l in range(32)]; ls=[ls[l]+ls[l^2] for l in range(32)]
            for l in range(32):
                g,t=l>>2,l&3
                hd,row=slot_of(warp*16+g+8*r); job=job0+hd
                if row>=Sq or (packed and (hd>=pack or job>=jobs)): continue
                inv=1/ls[l] if ls[l]>0 else 0.0
                for dt in range(NT_O):
                    O[job][row,dt*8+2*t]=st['acc'][l][dt][2*r]*inv; O[job][row,dt*8+2*t+1]=st['acc'][l][dt][2*r+1]*inv
                if t==0: LSE[job][row]=(st['rmax'][l][r]+math.log2(ls[l]))*math.log(2) if ls[l]>0 else -math.inf

def run(Sq,Sk,D,causal,jobs=1,seed=0,MT=1):
    rng=np.random.default_rng(seed)
    Q,K,V=(rng.standard_normal((jobs,n,D)).astype(np.float16).astype(np.float64) for n in (Sq,Sk,Sk))
    sc=1/math.sqrt(D)
    O=np.full((jobs,Sq,D),np.nan); L=np.full((jobs,Sq),np.nan)
    pack=min(16*WARPS//Sq,64//Sk)  # as flash2.cu's heads_per_block
    if pack>=2:
        for job0 in range(0,jobs,pack): kernel_block(Q,K,V,D,causal,sc*1.4426950408889634,O,L,True,job0,0,pack)
    else:
        for job in range(jobs):
            for m0 in range(0,Sq,tiles(D,MT,False)[0]): kernel_block(Q,K,V,D,causal,sc*1.4426950408889634,O,L,False,job,m0,1,MT)
    err=lerr=0.0; empty_ok=True
    for job in range(jobs):
        S=Q[job]@K[job].T*sc
        if causal:
            for i in range(Sq):
                S[i,max(0,i+Sk-Sq+1):]=-np.inf  # bottom-right: key j visible iff j <= i + Sk - Sq
        m=S.max(1,keepdims=True); ok=np.isfinite(m[:,0])
        P=np.where(ok[:,None],np.exp(S-np.where(ok[:,None],m,0)),0); l=P.sum(1,keepdims=True)
        R=np.where(ok[:,None],P@V[job]/np.where(l>0,l,1),0)
        RL=np.where(ok,np.log(np.where(l[:,0]>0,l[:,0],1))+np.where(ok,m[:,0],0),-np.inf)
        err=max(err,np.max(np.abs(O[job]-R)) if not np.isnan(O[job]).any() else float('nan'))
        lerr=max(lerr,np.max(np.abs(np.where(ok,L[job]-RL,0))))
        empty_ok&=bool(np.all(np.isinf(L[job][~ok])) and np.all(O[job][~ok]==0))
    print(f"Sq={Sq} Sk={Sk} D={D} causal={causal} heads={jobs} ({'packed %d per block' % pack if pack>=2 else 'plain, %d row tiles per warp' % MT}): "
          f"max|O-R|={err:.2e} max|LSE err|={lerr:.2e} nan={np.isnan(O).sum()} empty_ok={empty_ok}")
    return err<5e-3 and lerr<1e-3 and empty_ok

def hoisted_addresses_match():
    # v3's kernel computes these addresses without swz(): per-thread constant chunk and swizzle
    # in load_rows, and ldmatrix lane rows whose XOR is always lane & 7. Same bytes as swz().
    for D in (64,128):
        CH=D//8; RS=128//CH
        for tid in range(128):
            chunk,r=tid%CH,tid//CH
            for i in range(64//RS):
                if 2*swz(D,r+i*RS,chunk)!=2*swz(D,r,chunk)+i*RS*D*2: return False
        for l in range(32):
            l7,k_hi,v_hi=l&7,(l>>3)&1,l>>4
            sK=((l&7)+((l>>4)<<3))*D*2; sV=((l&7)+(((l>>3)&1)<<3))*D*2
            for kk in range(D//16):
                for nt in range(0,BN//8,2):
                    if 2*swz(D,nt*8+(l&7)+((l>>4)<<3),2*kk+k_hi)!=sK+nt*8*D*2+((((2*kk)|k_hi)^l7)<<4): return False
            for kb in range(BN//16):
                for dt in range(0,D//8,2):
                    if 2*swz(D,kb*16+(l&7)+(((l>>3)&1)<<3),dt+v_hi)!=sV+kb*16*D*2+(((dt|v_hi)^l7)<<4): return False
    return True

ok=hoisted_addresses_match()
print("hoisted addresses (load_rows, ldmatrix lanes) match swz:", ok)
cases=[(17,17,64,0),(70,70,64,1),(130,65,64,1),(65,130,128,1),(1,9,64,0),(100,3,64,1),(64,64,128,0),
       # packed: several heads per block, a partial last block, tails, S_q != S_k, rows that see no key
       (4,4,128,0,20),(4,4,64,1,17),(17,17,64,1,7),(32,32,128,1,3),(1,31,64,0,70),(23,5,64,1,5),(5,23,128,1,4)]
for args in cases:
    ok&=run(*args)
# v5's candidate: two row tiles per warp (BM = 128; BN = 32 at d128), tails and causal both ways
for args in [(130,130,64,1),(200,77,128,1),(77,200,64,1),(129,129,128,0)]:
    ok&=run(*args,MT=2)
print("ALL OK" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
