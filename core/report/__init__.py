"""Investigation files (.tfdoctor) and the reports made from them."""
