package kernels

// The example model's element-wise steps (dp/mlp's MLP on the device): bias broadcast,
// ReLU and its mask, softmax cross-entropy and the bias-gradient column sums. Each
// follows dp/mlp's host code operation for operation, in the same summation order, so
// only the matrix products (cuBLAS) and exp/log round differently.

// Model kernel names.
const (
	BiasRowsName    = "goccl_bias_rows_f32"
	ReLUName        = "goccl_relu_f32"
	ReLUMaskName    = "goccl_relu_mask_f32"
	SoftmaxXentName = "goccl_softmax_xent_f32"
	ColSumName      = "goccl_colsum_f32"
	Zero8Name       = "goccl_zero_u8"
	Zero32Name      = "goccl_zero_u32"
)

func modelKernels() []Kernel {
	return []Kernel{
		// Zeroing as a kernel on the caller's stream: cudaMemset runs on the legacy
		// stream, which does not order with goccl's non-blocking streams.
		{Name: Zero8Name, Params: []Param{{"x", "unsigned char*"}, {"n", "long long"}}, body: "x[i] = 0;"},
		{Name: Zero32Name, Params: []Param{{"x", "unsigned int*"}, {"n", "long long"}}, body: "x[i] = 0u;"},
		{Name: BiasRowsName, Params: []Param{{"y", "float*"}, {"b", "const float*"}, {"n", "long long"}, {"cols", "long long"}},
			body: "y[i] = b[i % cols];"},
		{Name: ReLUName, Params: []Param{{"y", "float*"}, {"n", "long long"}},
			body: "if (y[i] < 0.0f) y[i] = 0.0f;"},
		{Name: ReLUMaskName, Params: []Param{{"dx", "float*"}, {"act", "const float*"}, {"n", "long long"}},
			body: "if (act[i] <= 0.0f) dx[i] = 0.0f;"},
		// One thread per row, as mlp.MLP.Loss: the row maximum, exp in double, the sum in
		// double, the row's loss term, then the scaled gradient of the logits.
		{Name: SoftmaxXentName, raw: true,
			Params: []Param{{"logits", "const float*"}, {"labels", "const int*"}, {"d", "float*"}, {"rowloss", "double*"},
				{"rows", "long long"}, {"cols", "long long"}, {"scale", "float"}},
			body: `GOCCL_LOOP(r, rows) {
		const float* row = logits + r * cols;
		float* dr = d + r * cols;
		float mx = row[0];
		for (long long j = 0; j < cols; j++) mx = row[j] > mx ? row[j] : mx;
		double sum = 0.0;
		for (long long j = 0; j < cols; j++) {
			double e = exp((double)(row[j] - mx));
			dr[j] = (float)e;
			sum += e;
		}
		int lab = labels[r];
		rowloss[r] = log(sum) - (double)(row[lab] - mx);
		float k = scale / (float)rows / (float)sum;
		for (long long j = 0; j < cols; j++) dr[j] *= k;
		dr[lab] -= scale / (float)rows;
	}`},
		// One thread per column, rows in order: the same float additions as the host's
		// db[j] += dy[i][j] loop.
		{Name: ColSumName, raw: true,
			Params: []Param{{"db", "float*"}, {"dy", "const float*"}, {"rows", "long long"}, {"cols", "long long"}},
			body: `GOCCL_LOOP(j, cols) {
		float acc = db[j];
		for (long long r = 0; r < rows; r++) acc += dy[r * cols + j];
		db[j] = acc;
	}`},
	}
}
