__device__ char big[64 << 20];
__device__ int init_data[1024] = {1, 2, 3};
extern "C" __global__ void touch(int i) { big[i] = 1; init_data[i & 1023] = 2; }
