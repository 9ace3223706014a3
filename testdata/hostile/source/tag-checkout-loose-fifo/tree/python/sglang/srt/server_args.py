class ServerArgs:
    def _handle_model_specific_adjustments(self):
        if is_sm90_supported() or is_sm100_supported():
            self.enable_flashinfer_allreduce_fusion = True
        return self
