"""fixers"""
