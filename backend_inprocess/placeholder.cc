// Placeholder translation unit until the first real source lands.
